"""The pure core of the media workers: image transforms, prompts, results. No I/O, no event loop."""
