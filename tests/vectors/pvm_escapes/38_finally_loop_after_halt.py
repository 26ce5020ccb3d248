# expect: halted out_of_cycles
# The halt is sticky: code in finally cannot keep running once the meter is exhausted.
def handler(payload):
    try:
        while True:
            pass
    finally:
        n = 0
        while True:
            n = n + 1
