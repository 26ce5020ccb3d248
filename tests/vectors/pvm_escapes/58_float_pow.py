# expect: halted forbidden
# libm pow() is not correctly rounded: results could differ between platforms.
def handler(payload):
    return str(2.0 ** 0.5).encode()
