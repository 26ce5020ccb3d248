# expect: rejected dunder_attribute
def handler(payload):
    return str(().__ｃｌａｓｓ__).encode()
