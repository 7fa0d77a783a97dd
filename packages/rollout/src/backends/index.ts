export * from './types';
export * from './backend-kind';
export * from './registry';
export * from './onnx/index';
export * from './openai/index';
export * from './vllm/index';
