"""What the tests share, apart from the tests themselves and their fixtures.

Each test module is ``tests/test_<subject>.py`` (``tests/browser/test_<subject>.py`` for
Chromium); fixtures are in ``tests/conftest.py`` (``tests/browser/conftest.py``) and the
two fixture plugins it lists (``mail``, ``audit``). Everything else a test imports is here,
one module per concern:

* ``config``: the settings every test app starts from (``base_config``, ``TEST_SECRET``);
  ``IN_CI``.
* ``databases``: the PostgreSQL test databases (create, drop, reach), migrating a
  database, emptying the tables.
* ``rows``: reading what the app wrote (``row_count``, ``read_rows``,
  ``hearing_of_new_rows``); ``NewSession``.
* ``sql_counter``: recording the SQL statements an app runs (``counting_sql``).
* ``signin``: signing a test client in with the demo credentials (``demo_sign_in``,
  ``AuthActions``).
* ``second_factor``: authenticator-app codes, enrolment, the second-factor page.
* ``servers``: ``free_port``; the production server in a process (``run_server``).
* ``mail``: SMTP servers on loopback, the development outbox, the e-mail sign-in steps
  (a fixture plugin).
* ``audit``: an app with a password provider and the audit trail's reads (a fixture
  plugin).
* ``oauth``: identity providers (the Node oidc-provider that ``tests/op/server.mjs`` runs,
  and a Python fake), a browser that follows a sign-in through them.
* ``passkey_authenticator``: a software passkey authenticator; ``passkey_ceremonies``:
  one browser's ceremonies through the real routes with it (``Passkeys``).
* ``hostile_corpus``: the hostile-input suite's values, field discovery and checks;
  ``routes``: every route and method of the app, from its URL map (``TARGETS``).
* ``every_event``: drives every audit event type once, for the trail's and the
  ``audit_event`` signal's tests.
* ``faults``: broken services for the fault suite (a private PostgreSQL cluster, SMTP and
  HTTP servers that fail on command).
* ``cluster``: the local cluster the cluster tests run (``scripts/cluster``);
  ``cluster_app``: the app it serves (``WSGI_APP=tests.support.cluster_app:app``).
* ``browser``: the Chromium suite's live servers, SMTP inbox, page checks (axe-core,
  console errors) and the demo sign-in in a page; ``tv``: the device sign-in tests' second
  live server (the "TV").

Not Python, and so not here: ``tests/op/server.mjs`` (the OpenID Provider) and
``tests/authjs_clients/`` (Auth.js's browser clients, bundled for the browser tests).
"""
