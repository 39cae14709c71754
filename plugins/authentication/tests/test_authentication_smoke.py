def test_smoke(client, make_user, admin_headers):
    u = make_user()
    r = client.get("/authentication/user", headers=u.headers)
    assert r.status_code == 200, r.get_json()
    print(r.get_json())
    r = client.get("/authentication/users", headers=admin_headers)
    print(r.get_json())
    assert r.get_json()["count"] == 1


def test_openapi(client):
    r = client.get("/openapi.json")
    assert r.status_code == 200
    assert "/authentication/local" in r.get_json()["paths"]
