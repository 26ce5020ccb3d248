# expect: rejected match_statement
def handler(payload):
    match payload:
        case [first, *rest]:
            return bytes([first, *rest])
    return b"x"
