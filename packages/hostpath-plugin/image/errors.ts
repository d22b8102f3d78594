// The image build's one error: what could not be put in the image, and
// what to do about it. The build is a tool run by hand or by a test, so a
// failure ends it with this message (see cli.ts).
import { CsiplugError } from '@csiplug/core';

export class ImageBuildError extends CsiplugError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('EIMAGE_BUILD', message, options);
  }
}
