"""The embedded stack's InvokeEndpoint route: the part SageMaker's platform plays on a multi-model endpoint.

- :mod:`.runtime_server` and :mod:`.runtime` — the ``POST /endpoints/<name>/invocations`` route, on its
  own port and in front of moto;
- :mod:`.endpoint_runtime` and :mod:`._lifecycle` — one in-service endpoint: downloads, loads, unloads
  and restarts of its Triton;
- :mod:`._prepare`, :mod:`.extract`, :mod:`.limits`, :mod:`.support`, :mod:`.adapt` — an archive from S3
  to a model directory Triton can load, within the stack's limits;
- :mod:`.lru`, :mod:`.names`, :mod:`.responses`, :mod:`._http11` — the model cache, names, SageMaker's
  answers and the HTTP/1.1 parser.
"""
