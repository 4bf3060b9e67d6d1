"""Database sessions: the opaque cookie, the row behind it, its lifetime and update age, and
what it keeps of the provider's session (``store``); the recent sign-in that changing a way
in or deleting an account needs (``reauthentication``)."""
