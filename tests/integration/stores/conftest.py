"""The store tests run against a local folder and a real SeaweedFS S3 server."""

from tests.integration.s3_fixture import object_store, seaweed

__all__ = ["object_store", "seaweed"]
