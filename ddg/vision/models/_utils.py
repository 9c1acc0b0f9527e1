"""Helpers shared by the model constructors."""

__all__ = ["no_pretrained"]


def no_pretrained(arch, pretrained):
    """Raise when ``pretrained`` asks for weights: ddg downloads no model weights."""
    if pretrained:
        raise ValueError(
            f"ddg.vision.models.{arch}: pretrained=True cannot be honoured: ddg does not download "
            f"pretrained weights. Build the model with pretrained=False and load a Paddle .pdparams file "
            f"saved in ddg's format, e.g. model.set_state_dict(ddg.load('{arch}.pdparams')) "
            f"(convert a pickled Paddle file first with paddle.load and ddg.save where Paddle is installed)")
