"""llama.cpp's ``llama-server`` as a server kind (:mod:`accelbench.backends.servers`): recognised by ``/props``'
``build_info``; exactly N tokens asked with ``ignore_eos`` and ``max_tokens`` (it has no ``min_tokens``); the
random-weight models' tokens that are not whole UTF-8 banned in the request (``logit_bias``); its ``/metrics``
series (with ``--metrics``).

``--engine llama.cpp -m hf:<architecture>|hf:/folder|/path/model.gguf`` (:func:`launch`): the binary found
(:func:`~.server.find_server`), the GGUF file written or converted once into the cache (:func:`~.checkpoint.gguf_checkpoint`)
in the served precision (bf16, or Q8_0: 8.5 bits a weight), ``-np`` the level's most requests in flight, ``-c`` the
longest request times ``-np``, every layer on the GPU (``-ngl 99``).
"""

from __future__ import annotations

from accelbench.backends.servers.kind import LaunchPlan, LaunchRequest, Metrics, ServerKind, register
from accelbench.backends.servers.llamacpp import checkpoint, server, weights


def launch(req: LaunchRequest) -> LaunchPlan:
    """The built-in launch of ``llama-server`` for ``req`` (module docstring).

    Raises:
        ServerNotFound: no binary (one line saying how to build one); ConversionError, UnknownModelError,
            MissingDependencyError: as :func:`~.checkpoint.gguf_checkpoint`.
    """
    binary = server.find_server(req.server_bin)
    precision = KIND.precision(req.precision, req.device.type)
    ckpt = checkpoint.gguf_checkpoint(req.model, req.cache_dir, precision, req.seed, req.device)
    alias = ckpt.gguf.stem
    command = server.server_command(
        binary,
        ckpt.gguf,
        req.port,
        parallel=req.parallel,
        ctx_per_slot=req.tokens_per_request,
        gpu=req.device.type == "cuda",
        alias=alias,
    )
    return LaunchPlan(
        command=command,
        model_id=alias,
        tokenizer_dir=ckpt.tokenizer_dir,
        precision=ckpt.precision or precision,
        version=server.server_version(binary),
        weights=ckpt.weights,
    )


def _detect(client) -> tuple[bool, str | None]:
    props = client.get(server.PROPS_PATH).json()
    return "build_info" in props, server.build_info(props)


KIND = register(
    ServerKind(
        name="llama.cpp",
        about="llama.cpp's llama-server",
        fixed_length=server.fixed_length,
        detect=_detect,
        extra_body={"cache_prompt": False, "temperature": 0.0},
        keep_alive=False,
        banned_tokens=server.banned_body,
        metrics=Metrics(
            running=server.METRICS["requests_running"],
            waiting=server.METRICS["requests_waiting"],
            prompt_tokens=server.METRICS["prompt_tokens"],
            output_tokens=server.METRICS["output_tokens"],
        ),
        checkpoint="GGUF",
        precisions={p.name: p.bits_per_weight for p in weights.PRECISIONS.values()},
        launch=launch,
        requires=("gguf",),
        binary=server.BINARY,
        preflight=lambda settings: server.find_server(settings.server_bin),
    )
)
