"""Messages over REST: sending, listing newest first, deleting (sender or admin)."""

from __future__ import annotations

ADMIN = {"masterkey": "test-master-key"}


def test_send_answers_the_stored_message(client, chat, make_user):
    owner = make_user()
    room_id = chat.create_room(owner, [])
    response = client.post(f"/chat/rooms/{room_id}/messages", json={"message": "hi"}, headers=owner.headers)
    assert response.status_code == 201
    message = response.get_json()
    assert set(message) == {"_id", "room", "sender", "message", "createdAt"}
    assert (message["room"], message["sender"], message["message"]) == (room_id, owner.id, "hi")


def test_messages_are_listed_newest_first_with_skip_and_limit(client, chat, make_user):
    owner, guest = make_user(), make_user()
    room_id = chat.create_room(owner, [guest.id])
    for n in range(5):
        chat.send(owner if n % 2 else guest, room_id, f"m{n}")

    body = client.get(f"/chat/rooms/{room_id}/messages", headers=guest.headers).get_json()
    assert body["count"] == 5
    assert [m["message"] for m in body["messages"]] == ["m4", "m3", "m2", "m1", "m0"]
    page = client.get(f"/chat/rooms/{room_id}/messages?skip=1&limit=2", headers=owner.headers).get_json()
    assert page["count"] == 5 and [m["message"] for m in page["messages"]] == ["m3", "m2"]
    too_many = client.get(f"/chat/rooms/{room_id}/messages?limit=1001", headers=owner.headers)
    assert too_many.status_code == 400


def test_outsiders_cannot_read_or_write(client, chat, make_user):
    owner, outsider = make_user(), make_user()
    room_id = chat.create_room(owner, [])
    chat.send(owner, room_id, "secret")
    assert client.get(f"/chat/rooms/{room_id}/messages", headers=outsider.headers).status_code == 404
    sent = client.post(f"/chat/rooms/{room_id}/messages", json={"message": "let me in"}, headers=outsider.headers)
    assert sent.status_code == 404
    assert client.get(f"/chat/rooms/{room_id}/messages", headers=owner.headers).get_json()["count"] == 1


def test_message_text_is_validated(client, chat, make_user):
    owner = make_user()
    room_id = chat.create_room(owner, [])
    url = f"/chat/rooms/{room_id}/messages"
    assert client.post(url, json={"message": ""}, headers=owner.headers).status_code == 400
    assert client.post(url, json={"message": "   "}, headers=owner.headers).status_code == 400
    assert client.post(url, json={"message": "x", "to": "y"}, headers=owner.headers).status_code == 400
    chat.configure(maxMessageLength=5)
    too_long = client.post(url, json={"message": "123456"}, headers=owner.headers)
    assert too_long.status_code == 400 and "message" in too_long.get_json()["errors"]
    assert client.post(url, json={"message": "12345"}, headers=owner.headers).status_code == 201


def test_only_the_sender_or_an_admin_deletes(client, chat, make_user):
    sender, other, outsider = make_user(), make_user(), make_user()
    room_id = chat.create_room(sender, [other.id])
    first = chat.send(sender, room_id, "one")["_id"]
    second = chat.send(sender, room_id, "two")["_id"]

    assert client.delete(f"/chat/messages/{first}", headers=other.headers).status_code == 403
    assert client.delete(f"/chat/messages/{first}", headers=outsider.headers).status_code == 404
    assert client.delete(f"/chat/messages/{first}").status_code == 401
    response = client.delete(f"/chat/messages/{first}", headers=sender.headers)
    assert response.status_code == 200 and response.get_json() == {"_id": first, "deleted": True}
    assert client.delete(f"/chat/messages/{first}", headers=sender.headers).status_code == 404
    assert client.delete(f"/chat/messages/{second}", headers=ADMIN).status_code == 200
    assert client.get(f"/chat/rooms/{room_id}/messages", headers=sender.headers).get_json()["count"] == 0


def test_message_deletion_can_be_disabled_for_users(client, chat, make_user):
    sender = make_user()
    room_id = chat.create_room(sender, [])
    message_id = chat.send(sender, room_id, "permanent")["_id"]
    chat.configure(allowMessageDelete=False)
    assert client.delete(f"/chat/messages/{message_id}", headers=sender.headers).status_code == 403
    assert client.delete(f"/chat/messages/{message_id}", headers=ADMIN).status_code == 200


def test_config_is_validated(client):
    response = client.put("/config/chat", json={"maxMessageLength": 0}, headers=ADMIN)
    assert response.status_code == 400
    assert client.get("/config/chat", headers=ADMIN).get_json()["maxMessageLength"] == 4000
