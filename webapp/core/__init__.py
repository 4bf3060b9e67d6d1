"""Building blocks every layer uses, each one concern: the clock (``clock``), the
application's hooks and signals (``hooks``), keyed hashes (``keyed_hashes``), values sealed
at rest (``sealing``), JSON from outside (``jsonsafe``), which answers are never cached
(``cache_headers``), absolute URLs from AUTH_URL (``urls``), safe redirects
(``redirects``), the host check (``hosts``), the trusted proxies (``proxies``) and the names
people type (``names``)."""
