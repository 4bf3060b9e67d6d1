"""The WSGI application (``DOT_PROVIDER_DIR`` must name the provider's directory)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.interop.django_provider.settings")
application = get_wsgi_application()
