# expect: rejected forbidden_name
class A(Exception):
    def run(self):
        return super().run()


def handler(payload):
    return str(object).encode()
