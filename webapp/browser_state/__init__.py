"""What the browser holds for us: cookies set and cleared at the end of a request
(``cookies``), short-lived values sealed in a cookie (``sealed_cookies``), the OAuth
state/PKCE/nonce checks (``oauth_checks``), browsers that have signed in before
(``known_browsers``), the provider it last signed in with (``last_provider``) and Flask's
own signed session cookie (``flask_session``)."""
