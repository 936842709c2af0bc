"""The embedded stack's Triton side: the ``tritonserver`` process and what it needs.

- :mod:`.server` — one ``tritonserver`` with its SageMaker front-end (:class:`TritonServer`);
- :mod:`.wheel` — where the ``nvidia-pytriton`` wheel keeps the binary, the python backend and its stubs;
- :mod:`.options` — what ``tritonserver`` arguments an endpoint's Environment may set, and their bounds;
- :mod:`.frontend` — the SageMaker front-end's worker threads: loads and unloads kept off invocations' way;
- :mod:`.netns` — the server's own network namespace, and connections into it (nothing else reaches it);
- :mod:`.procfs` — the model instances' processes and shared memory, read from ``/proc`` and ``/dev/shm``;
- :mod:`._process`, :mod:`._http` — starting and stopping the process, a keep-alive connection pool;
- :mod:`.platform` — the platforms the wheel runs on;
- ``backends/`` — the stack's python-based ``onnxruntime`` and ``pytorch`` backends.
"""
