"""Kubernetes' name and label validation (``k8s.io/apimachinery/pkg/util/validation``).

Each function returns ``None`` for a valid value, or why it is invalid, so callers can
attach the reason to a field path (the manifest loader) or to a status (NodeAffinity).
"""

from __future__ import annotations

import re

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def dns_label_error(name: str) -> str | None:
    """RFC 1123 label (``validation.IsDNS1123Label``): namespaces, container names."""
    if len(name) > 63:
        return "must be no more than 63 characters"
    if not _DNS_LABEL.match(name):
        return (
            "must be a lowercase RFC 1123 label: lowercase alphanumerics and '-', "
            "starting and ending with an alphanumeric"
        )
    return None


def dns_subdomain_error(name: str) -> str | None:
    """RFC 1123 subdomain (``validation.IsDNS1123Subdomain``): most object names."""
    if len(name) > 253:
        return "must be no more than 253 characters"
    if not _DNS_SUBDOMAIN.match(name):
        return (
            "must be a lowercase RFC 1123 subdomain: lowercase alphanumerics, '-' and '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def qualified_name_error(key: str) -> str | None:
    """``validation.IsQualifiedName``: label keys, topology keys, resource names."""
    if key.count("/") > 1:
        return "must be a qualified name: [prefix/]name, with at most one '/'"
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix and dns_subdomain_error(prefix):
        return "prefix part must be a lowercase DNS subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def label_value_error(value: str) -> str | None:
    """``validation.IsValidLabelValue``: empty, or at most 63 qualified-name characters."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if value and not _QUALIFIED_NAME.match(value):
        return (
            "must consist of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None
