def test_signin_and_session(client, auth):
    r = auth.signin()
    assert r.status_code == 302
    body = client.get("/auth/session").json
    assert body["user"]["email"] == "ann@example.com"
