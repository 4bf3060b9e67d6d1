"""The WSGI application a production server loads: ``webapp.wsgi:app`` (deploy/serve.py).

Without Flask-Migrate (``create_app(migrations=False)``): servers never migrate, and Alembic
would add about 9 MB to every worker.
"""

from webapp import create_app

app = create_app(migrations=False)
