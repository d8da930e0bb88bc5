"""LarkBot media workers: thumbnails, alt texts and frames for the pipeline's media jobs, and the
``media.read_image`` service. Entry point: :class:`larkbot.media.app.MediaService`; see docs/media.md."""
