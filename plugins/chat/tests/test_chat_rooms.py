"""Rooms over REST: creation, visibility to participants only, adding users, leaving, admin routes."""

from __future__ import annotations

from sqlalchemy import func, select

from trellis_chat.models import Message, Participant, Room

ADMIN = {"masterkey": "test-master-key"}


def count(db, model) -> int:
    return db.execute(select(func.count()).select_from(model)).scalar_one()


def test_create_room_answers_its_id_and_participants_see_it(client, chat, make_user):
    owner, guest, outsider = make_user(), make_user(), make_user()
    response = client.post("/chat/rooms", json={"roomName": "team", "users": [guest.id]}, headers=owner.headers)
    assert response.status_code == 201
    room_id = response.get_json()["roomId"]
    assert list(response.get_json()) == ["roomId"]

    for member in (owner, guest):
        room = client.get(f"/chat/rooms/{room_id}", headers=member.headers).get_json()
        assert room["_id"] == room_id and room["name"] == "team" and room["creator"] == owner.id
        assert sorted(room["participants"]) == sorted([owner.id, guest.id])
        assert room["createdAt"].endswith("Z")
    assert client.get(f"/chat/rooms/{room_id}", headers=outsider.headers).status_code == 404


def test_room_list_holds_only_the_callers_rooms_newest_first(client, chat, make_user):
    me, other = make_user(), make_user()
    first = chat.create_room(me, [], name="first")
    second = chat.create_room(other, [me.id], name="second")
    chat.create_room(other, [], name="not mine")

    body = client.get("/chat/rooms", headers=me.headers).get_json()
    assert body["count"] == 2
    assert [room["_id"] for room in body["rooms"]] == [second, first]
    page = client.get("/chat/rooms?skip=1&limit=1", headers=me.headers).get_json()
    assert page["count"] == 2 and [room["_id"] for room in page["rooms"]] == [first]


def test_unknown_user_ids_are_refused_and_nothing_is_written(client, db, make_user):
    owner, guest = make_user(), make_user()
    before = count(db, Room)
    response = client.post("/chat/rooms", json={"roomName": "x", "users": [guest.id, "nobody"]}, headers=owner.headers)
    assert response.status_code == 400
    assert response.get_json()["errors"] == {"users": ["No user with id 'nobody'."]}
    assert count(db, Room) == before


def test_room_bodies_are_validated(client, make_user):
    owner = make_user()
    cases = [
        {"users": []},  # no name
        {"roomName": "", "users": []},
        {"roomName": "x"},  # no users
        {"roomName": "x", "users": "not-a-list"},
        {"roomName": "x", "users": [], "extra": 1},  # unknown field
    ]
    for body in cases:
        response = client.post("/chat/rooms", json=body, headers=owner.headers)
        assert response.status_code == 400, body
        assert response.get_json()["name"] == "INVALID_ARGUMENTS"


def test_user_routes_need_a_user_token(client, make_user):
    assert client.get("/chat/rooms").status_code == 401
    assert client.post("/chat/rooms", json={"roomName": "x", "users": []}).status_code == 401
    assert client.get("/chat/rooms", headers=ADMIN).status_code == 403


def test_add_users_by_a_participant(client, chat, make_user):
    owner, guest, newcomer, outsider = make_user(), make_user(), make_user(), make_user()
    room_id = chat.create_room(owner, [guest.id])

    url = f"/chat/rooms/{room_id}/addUsers"
    response = client.put(url, json={"users": [newcomer.id, guest.id]}, headers=guest.headers)
    assert response.status_code == 200
    assert sorted(response.get_json()["participants"]) == sorted([owner.id, guest.id, newcomer.id])
    assert client.get(f"/chat/rooms/{room_id}", headers=newcomer.headers).status_code == 200

    assert client.put(url, json={"users": [outsider.id]}, headers=outsider.headers).status_code == 404
    unknown = client.put(url, json={"users": ["ghost"]}, headers=owner.headers)
    assert unknown.status_code == 400 and "users" in unknown.get_json()["errors"]
    assert client.put(url, json={"users": []}, headers=owner.headers).status_code == 400


def test_leave_a_room(client, chat, make_user):
    owner, guest = make_user(), make_user()
    room_id = chat.create_room(owner, [guest.id])

    response = client.put(f"/chat/leave/{room_id}", headers=guest.headers)
    assert response.status_code == 200
    assert response.get_json() == {"_id": room_id, "left": True}
    assert client.get(f"/chat/rooms/{room_id}", headers=guest.headers).status_code == 404
    assert client.get(f"/chat/rooms/{room_id}", headers=owner.headers).get_json()["participants"] == [owner.id]
    assert client.put(f"/chat/leave/{room_id}", headers=guest.headers).status_code == 404


def test_admin_lists_every_room_and_its_messages(client, chat, make_user):
    alice, bob = make_user(), make_user()
    mine = chat.create_room(alice, [])
    theirs = chat.create_room(bob, [])
    chat.send(bob, theirs, "hello")

    rooms = client.get("/admin/chat/rooms", headers=ADMIN).get_json()
    assert {mine, theirs} <= {room["_id"] for room in rooms["rooms"]} and rooms["count"] >= 2
    messages = client.get(f"/admin/chat/rooms/{theirs}/messages", headers=ADMIN).get_json()
    assert [m["message"] for m in messages["messages"]] == ["hello"] and messages["count"] == 1
    assert client.get("/admin/chat/rooms/nope/messages", headers=ADMIN).status_code == 404
    assert client.get("/admin/chat/rooms", headers=alice.headers).status_code == 403
    assert client.get("/admin/chat/rooms").status_code == 401


def test_admin_deletes_a_room_with_its_messages(client, db, chat, make_user, admin_token):
    owner, guest = make_user(), make_user()
    room_id = chat.create_room(owner, [guest.id])
    chat.send(owner, room_id, "bye")

    response = client.delete(f"/admin/chat/rooms/{room_id}", headers={"Authorization": f"Bearer {admin_token}"})
    assert response.status_code == 200 and response.get_json() == {"_id": room_id, "deleted": True}
    assert client.get(f"/chat/rooms/{room_id}", headers=owner.headers).status_code == 404
    for model in (Message, Participant):
        assert db.execute(select(func.count()).select_from(model).where(model.room_id == room_id)).scalar_one() == 0
    assert client.delete(f"/admin/chat/rooms/{room_id}", headers=ADMIN).status_code == 404


def test_a_deleted_user_leaves_every_room(client, chat, make_user):
    owner, guest = make_user(), make_user()
    room_id = chat.create_room(owner, [guest.id])
    assert client.delete(f"/authentication/users/{guest.id}", headers=ADMIN).status_code == 200
    assert client.get(f"/chat/rooms/{room_id}", headers=owner.headers).get_json()["participants"] == [owner.id]


def test_inactive_module_hides_user_routes_but_not_admin_ones(client, chat, make_user):
    owner = make_user()
    chat.configure(active=False)
    assert client.get("/chat/rooms", headers=owner.headers).status_code == 404
    assert client.get("/admin/chat/rooms", headers=ADMIN).status_code == 200


def test_routes_are_in_the_openapi_document(client):
    paths = client.get("/openapi.json").get_json()["paths"]
    for path in (
        "/chat/rooms",
        "/chat/rooms/{roomId}",
        "/chat/rooms/{roomId}/addUsers",
        "/chat/leave/{roomId}",
        "/chat/rooms/{roomId}/messages",
        "/chat/messages/{messageId}",
        "/admin/chat/rooms",
        "/admin/chat/rooms/{roomId}/messages",
        "/admin/chat/rooms/{roomId}",
    ):
        assert path in paths, path
    delete = paths["/chat/messages/{messageId}"]["delete"]
    assert {"masterkey": []} in delete["security"] and {"bearerAuth": []} in delete["security"]
    assert "401" in delete["responses"] and "403" in delete["responses"]
