"""The render path: request validation, the turn loop of the native formats,
segments and RenderedChat, media parts, request rows of batch inputs."""
