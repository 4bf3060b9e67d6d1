"""What an operator sees of a running app: request ids and logging (``logs``), and what may be
written to a log line (``logsafe``: untrusted values encoded, secrets redacted)."""
