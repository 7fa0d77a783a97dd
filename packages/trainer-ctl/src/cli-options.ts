/** yargs options that several commands take, worded once so that their --help agrees. */

/** The run directory as a command's positional argument (status, report). */
export const RUN_DIR_POSITIONAL = { type: 'string', demandOption: true, describe: 'the run directory (runs/<run.name>)' } as const;

/** --run-dir of a command that starts run processes (train, worker). */
export const RUN_DIR_OPTION = { type: 'string', describe: 'run directory (default <run.output_dir>/<run.name>)' } as const;

/** --threads of a command that runs the onnx backend itself (serve, probe). */
export const THREADS_OPTION = { type: 'number', default: 0, describe: 'onnxruntime threads per operator; 0 lets it choose' } as const;
