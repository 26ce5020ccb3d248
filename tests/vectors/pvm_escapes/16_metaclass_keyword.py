# expect: rejected class_keywords
class Meta(Exception):
    pass


class Evil(metaclass=Meta):
    pass


def handler(payload):
    return b"x"
