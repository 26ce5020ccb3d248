# expect: rejected relative_import
from . import secrets


def handler(payload):
    return secrets
