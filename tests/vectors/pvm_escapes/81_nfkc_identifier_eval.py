# expect: rejected forbidden_name
# Fullwidth letters are NFKC-normalized by the parser: this is eval().
def handler(payload):
    return str(ｅｖａｌ("1 + 1")).encode()
