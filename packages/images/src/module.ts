// imagesModule: the agent's task images (TaskImages over <dataDir>/images) as
// one Module. Register binds ITaskImages (a deployment's own binding first
// is kept); start opens the store, which cleans what a killed pull or unpack
// left; stop disposes the service (GC timers end; task roots stay mounted for
// the tasks that run on them, and the next agent takes them as they are).
import { IClock, ILogger, bindDefault, declareTokenOwner, isDisposable, type Clock, type Logger, type Module } from '@csiplug/core';
import type { ArchivePathPolicy } from './archive/archive-catalog';
import { TaskImages, type TaskImagesDriverConfig, type TaskImagesService } from './task-images';

/** The task image service: what the runner asks for an image task's root. */
export type ITaskImages = TaskImagesService;
export const ITaskImages: unique symbol = Symbol('ITaskImages');

export interface ImagesModuleConfig {
  /** The agent's data dir: the store is <dataDir>/images (0700). */
  readonly dataDir: string;
  /** plugin "docker" { config { … } }: the agent config's ImageDriverConfig. */
  readonly docker: TaskImagesDriverConfig;
  /** Which archive paths a task's image may name (the agent gives the runner's allowed_host_paths check). */
  readonly archivePathPolicy?: ArchivePathPolicy;
}

export const imagesModule: Module<ImagesModuleConfig> = {
  name: 'images',
  register: (container, config) => {
    bindDefault(container, ITaskImages, {
      useFactory: (c) =>
        new TaskImages({
          dataDir: config.dataDir,
          docker: config.docker,
          ...(config.archivePathPolicy ? { archivePathPolicy: config.archivePathPolicy } : {}),
          clock: c.resolve<Clock>(IClock),
          logger: c.resolve<Logger>(ILogger),
        }),
    });
  },
  start: async (container) => {
    const images = container.resolve<TaskImagesService>(ITaskImages);
    if (images instanceof TaskImages) await images.open();
  },
  stop: (container) => {
    const images = container.resolve<TaskImagesService>(ITaskImages);
    if (isDisposable(images)) images.dispose();
  },
};

declareTokenOwner({ name: 'images', exportName: 'imagesModule', packageName: '@csiplug/images' }, [ITaskImages]);
