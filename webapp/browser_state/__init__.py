"""What the browser holds for us: cookies set and cleared at the end of a request
(``cookies``), short-lived values sealed in a cookie (``sealed_cookies``), the OAuth
state/PKCE/nonce checks (``oauth_checks``), browsers that have signed in before
(``known_browsers``) and Flask's own signed session cookie (``flask_session``)."""
