from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.create_bundle_request_files import CreateBundleRequestFiles


T = TypeVar("T", bound="CreateBundleRequest")


@_attrs_define
class CreateBundleRequest:
    """
    Attributes:
        files (CreateBundleRequestFiles): Relative path -> UTF-8 content (without NUL); at most 256 files and 4 MiB in
            all
    """

    files: CreateBundleRequestFiles

    def to_dict(self) -> dict[str, Any]:
        files = self.files.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "files": files,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.create_bundle_request_files import CreateBundleRequestFiles  # noqa: PLC0415

        d = dict(src_dict)
        files = CreateBundleRequestFiles.from_dict(d.pop("files"))

        create_bundle_request = cls(
            files=files,
        )

        return create_bundle_request
