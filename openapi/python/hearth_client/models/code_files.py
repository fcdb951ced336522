from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.code_files_files import CodeFilesFiles


T = TypeVar("T", bound="CodeFiles")


@_attrs_define
class CodeFiles:
    """The job's code as inline files

    Attributes:
        files (CodeFilesFiles): Relative path -> UTF-8 content (without NUL); at most 256 files and 4 MiB in all
    """

    files: CodeFilesFiles

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
        from ..models.code_files_files import CodeFilesFiles  # noqa: PLC0415

        d = dict(src_dict)
        files = CodeFilesFiles.from_dict(d.pop("files"))

        code_files = cls(
            files=files,
        )

        return code_files
