"""Which image resolution setting a model takes (`--detail`, `--media-resolution`; issue 45, item 2), read from
its provider's record: refused as one line, before anything is written, where the provider has none.

- `detail` (records with image_setting "detail": OpenAI-shaped endpoints): each `image_url` part's `detail`
  (platform.openai.com/docs/guides/images-vision, read 2026-11-29). A server the user runs (`self_hosted`)
  receives it as is and may ignore it: the run says so in one line at the start.
- `media_resolution` (records with "media_resolution": Gemini, on its API and on Vertex AI): google-genai's
  `GenerateContentConfig.media_resolution`, MEDIA_RESOLUTION_LOW/MEDIUM/HIGH, the request-level setting that
  every Gemini model takes (ai.google.dev/gemini-api/docs/media-resolution, read 2026-11-29). Gemini 3 also
  takes one per image part; evalkit sends the request-level one: a run asks every image at one resolution,
  which the request-level setting says for Gemini 2.x and 3 alike.
- A cloud that serves several vendors' models (its record's model_vendor) takes a setting only for a vendor
  whose own record takes it: Claude on Vertex AI does not take Gemini's.
"""

from __future__ import annotations

from evalkit.core.errors import EvalkitError
from evalkit.providers.registry import IMAGE_SETTING_FLAGS, RECORDS, ImageSetting, find

MEDIA_RESOLUTION_ENUM = "MEDIA_RESOLUTION_"  # google-genai's MediaResolution names: MEDIA_RESOLUTION_LOW, …


def image_setting_of(provider: str, model: str) -> ImageSetting | None:
    """The resolution setting PROVIDER/MODEL's requests can carry (None: none)."""
    record = find(provider)
    if record is None or record.image_setting is None:
        return None
    if record.model_vendor is not None:
        vendor = record.model_vendor(model)
        if vendor is not None and vendor in RECORDS and RECORDS[vendor].image_setting != record.image_setting:
            return None
    return record.image_setting


def vendor_note(provider: str, model: str) -> str:
    """Where a cloud takes the setting for some vendors' models only: whose this model is."""
    record = find(provider)
    vendor = record.model_vendor(model) if record is not None and record.model_vendor is not None else None
    if record is None or record.image_setting is None or vendor is None:
        return ""
    return f"; on {provider}/ not for {vendor}/'s"


def given_settings(detail: str | None, media_resolution: str | None) -> dict[ImageSetting, str]:
    """The settings asked for (a `--detail auto` was made None by the settings: nothing asked)."""
    asked: dict[ImageSetting, str] = {}
    if detail is not None:
        asked["detail"] = detail
    if media_resolution is not None:
        asked["media_resolution"] = media_resolution
    return asked


def check_image_setting(model: str, detail: str | None, media_resolution: str | None) -> None:
    """Refuse, as one line naming the flag, a setting PROVIDER/MODEL does not take."""
    provider, _, name = model.partition("/")
    takes = image_setting_of(provider, name)
    for setting in given_settings(detail, media_resolution):
        if setting != takes:
            flag = IMAGE_SETTING_FLAGS[setting]
            instead = f"; it takes {IMAGE_SETTING_FLAGS[takes]}" if takes is not None else ""
            takers = ", ".join(f"{r.name}/" for r in RECORDS.values() if r.image_setting == setting)
            raise EvalkitError(f"{flag}: {model} has no such setting ({flag} is for {takers} models"
                               f"{vendor_note(provider, name)}){instead}")


def image_setting_note(provider: str, detail: str | None, media_resolution: str | None) -> str | None:
    """The one line said at the start when a server the user runs is sent a setting it may ignore."""
    record = find(provider)
    asked = given_settings(detail, media_resolution)
    if record is None or not record.self_hosted or not asked:
        return None
    setting, value = next(iter(asked.items()))
    return (f"{IMAGE_SETTING_FLAGS[setting]} {value} is sent as is; a {provider}/ server may ignore it "
            "(it then reads the images as it always does)")


def setting_of(detail: str | None, media_resolution: str | None) -> str | None:
    """The value the image-token formulas read (a request carries one of the two, at most)."""
    return detail if detail is not None else media_resolution


def media_resolution_enum(value: str) -> str:
    """google-genai's name for a `--media-resolution` value: low -> MEDIA_RESOLUTION_LOW."""
    return MEDIA_RESOLUTION_ENUM + value.upper()
