"""What happened, and who is asking too often: the audit trail (``trail``: the event types,
``record``, the "new device" check, the account page's and operators' reads), the throttles
that count before they decide (``throttles``), and a user agent as a device name
(``user_agents``, "Firefox on Linux")."""
