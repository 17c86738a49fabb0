"""The vendored schema copy (for fresh clones) is the project's shared schema, byte for byte."""

import hashlib
import os

import pytest
from acp_schema import SDK_SHARED, SDK_VENDORED, SHARED, VENDORED

OFFICIAL_MD5 = "4c526b8ba792fe22a64d04a7d1bee9f4"  # schema-v1.21.0, see ../shared/acp-schema/PROVENANCE.md
SDK_MD5 = "25b8363213dc455699ae379233f57fee"  # @agentclientprotocol/sdk 2.4.0's schema/v1/schema.json


def md5(path):
    with open(path, "rb") as handle:
        return hashlib.md5(handle.read()).hexdigest()


def test_vendored_copy_is_the_official_schema():
    assert md5(VENDORED) == OFFICIAL_MD5


@pytest.mark.skipif(not os.path.exists(SHARED), reason="no ../shared beside this clone")
def test_shared_schema_is_the_same_file():
    assert md5(SHARED) == md5(VENDORED)


def test_vendored_sdk_copy_is_the_sdks_schema():
    assert md5(SDK_VENDORED) == SDK_MD5


@pytest.mark.skipif(not os.path.exists(SDK_SHARED), reason="no ../shared beside this clone")
def test_shared_sdk_schema_is_the_same_file():
    assert md5(SDK_SHARED) == md5(SDK_VENDORED)
