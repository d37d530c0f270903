"""The render engine: the pipeline's stages run per service shard, in a process pool and
from a content-addressed cache, with output identical to the in-process pipeline."""
