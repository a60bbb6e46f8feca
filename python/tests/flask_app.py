"""The flask-limiter app of test_flask and the benchmark, configured by
the environment: two strings switch it to libdrl (DRL_APP_STORAGE="drl+...",
DRL_APP_STRATEGY="drl-gcra"); DRL_APP_LIMIT is the limit ("20/day").
Each response says which decision libdrl made (X-Drl-At-Us,
X-Drl-Retry-Us), for the test to compare with Retry-After."""
import os

import flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

import drl.limits

app = flask.Flask(__name__)
app.config.update(
    RATELIMIT_HEADERS_ENABLED=True,
    RATELIMIT_KEY_PREFIX=os.environ.get("DRL_APP_PREFIX", "app"),
    RATELIMIT_HEADER_RETRY_AFTER_VALUE=os.environ.get(
        "DRL_APP_RETRY_AFTER", "http-date"))
limiter = Limiter(get_remote_address, app=app,
                  storage_uri=os.environ["DRL_APP_STORAGE"],
                  strategy=os.environ["DRL_APP_STRATEGY"])


@app.route("/")
@limiter.limit(os.environ.get("DRL_APP_LIMIT", "20/day"))
def index():
    return "ok\n"


@app.after_request
def show_decision(response):
    if isinstance(limiter.storage, drl.limits.DrlStorage):
        latest = limiter.storage.latest()
        if latest is not None:
            response.headers["X-Drl-At-Us"] = str(latest[1])
            response.headers["X-Drl-Retry-Us"] = str(latest[0].retry_after_us)
    return response
