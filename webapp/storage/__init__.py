"""The database: the Flask-SQLAlchemy object (``db``), the tables (``models``; their history
is ``migrations/``), the engine and the hot read (``database``), the one commit at the end of
a request and every side transaction (``transactions``), migrations run once under a lock
(``schema_upgrade``), re-sealing every sealed column (``resealing``) and the benchmark's
per-request SQL counts (``sql_counts``)."""
