from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuthorizeLeaseRequest(_message.Message):
    __slots__ = ("token_sha256", "job_id", "placement_group_id")
    TOKEN_SHA256_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    token_sha256: str
    job_id: str
    placement_group_id: str
    def __init__(self, token_sha256: _Optional[str] = ..., job_id: _Optional[str] = ..., placement_group_id: _Optional[str] = ...) -> None: ...

class AuthorizeLeaseReply(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class ScopedToken(_message.Message):
    __slots__ = ("id", "scope", "created_time_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    created_time_ms: int
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., created_time_ms: _Optional[int] = ...) -> None: ...

class IssueTokenRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class IssueTokenReply(_message.Message):
    __slots__ = ("info", "token")
    INFO_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    info: ScopedToken
    token: str
    def __init__(self, info: _Optional[_Union[ScopedToken, _Mapping]] = ..., token: _Optional[str] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensReply(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[ScopedToken]
    def __init__(self, tokens: _Optional[_Iterable[_Union[ScopedToken, _Mapping]]] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeTokenReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ScopedTokenRecord(_message.Message):
    __slots__ = ("info", "sha256")
    INFO_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    info: ScopedToken
    sha256: str
    def __init__(self, info: _Optional[_Union[ScopedToken, _Mapping]] = ..., sha256: _Optional[str] = ...) -> None: ...
