# expect: halted out_of_cycles
# {**big} copies a million entries per iteration: each copy is charged per item.
def handler(payload):
    big = dict.fromkeys(range(500000))
    copies = 0
    while True:
        copies += len({**big})
