"""The WSGI application a production server loads: ``webapp.wsgi:app`` (deploy/serve.py).

Without Flask-Migrate (``create_app(migrations=False)``): servers never migrate, and Alembic
would add about 9 MB to every worker.

Log records skip what no line of ours prints (the calling frame, the thread, the process):
the optimisations the logging HOWTO lists, worth about a tenth of a session read with the
access log on.
"""

import logging

from webapp import create_app

logging._srcfile = None
logging.logThreads = False
logging.logProcesses = False
logging.logMultiprocessing = False

app = create_app(migrations=False)
