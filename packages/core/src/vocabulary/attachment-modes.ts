// CSI attachment modes as jobspecs and volume specs spell them (Nomad's
// names): a volume is used as a mounted file system or as a raw block device.

export const ATTACHMENT_MODES = ['file-system', 'block-device'] as const;
export type AttachmentMode = (typeof ATTACHMENT_MODES)[number];
