# expect: rejected star_import
from json import *  # noqa: F403


def handler(payload):
    return b"x"
