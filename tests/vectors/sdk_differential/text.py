# Unicode text handling: case mappings, classification, digits of other scripts, sorting, encoding.
from cowboy_sdk import actor, codec, public


@actor
class Text:
    @public
    def shout(self, s):
        out = {"upper": s.upper(), "lower": s.lower(), "casefold": s.casefold(), "title": s.title(),
               "swap": s.swapcase(), "len": len(s), "utf8": len(s.encode("utf-8")),
               "alpha": [c.isalpha() for c in s], "sorted": sorted(s), "repr": repr(s)}
        self.storage["last:" + s] = out
        return codec.encode(out)

    @public
    def digits(self, s):
        return codec.encode({"int": int(s), "isdigit": s.isdigit(), "isnumeric": s.isnumeric(),
                             "isdecimal": s.isdecimal()})
