"""The HTTP/JSON API (aiohttp): transaction submission, chain, actor, job and runner queries, simulation,
subscriptions, the ``/ui`` pages and the OpenAPI document; it reads the node through query objects.
"""
