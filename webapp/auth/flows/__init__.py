"""Sign-in use cases, one module each: e-mail, OAuth, credentials, linking, finishing.

A flow takes plain values (never the request), raises ``AuthError`` with a stable code, and
returns where the browser goes next; it never builds a Flask response.
"""
