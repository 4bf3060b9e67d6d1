"""E-mail: sending a message (``delivery``: SMTP, or the development outbox) and the one
normal form of an e-mail address (``email_addresses``)."""
