# expect: rejected forbidden_attribute
# Generator expression frames: gi_frame.f_back.f_globals reaches the host's globals.
def handler(payload):
    g = (x for x in [1])
    return str(g.gi_frame.f_back.f_globals).encode()
