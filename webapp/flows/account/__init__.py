"""Account use cases, one module each: what the account pages and JSON endpoints do,
without HTTP (``profile``: the name and a change of e-mail address). What several of them
need is in ``ways_in`` (the user's ways in, and the last-method rule) and ``recent_signin``
(the re-authentication they require).

Each flow takes the signed-in user's id (and session where it matters), checks ownership
itself (a row of another user is "not found", never acted on), raises ``AccountError``
with a stable code (webapp/errors.py), and never commits: the request's writes are
committed when it ends (webapp/storage/transactions.py).
"""
