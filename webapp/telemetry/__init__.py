"""What an operator sees of a running app: request ids and logging (``logs``), what may be
written to a log line (``logsafe``: untrusted values encoded, secrets redacted), and lines
as JSON objects for a machine to read (``jsonlines``, AUTH_LOG_FORMAT=json)."""
